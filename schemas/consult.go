package schemas

// Answers to non-blocking consultations (seed L2812-3026): the asker goes on
// after asking; the answer, once it came, is put into the asker's
// conversation before one of its later model calls, and where it was put is
// recorded, so a replay of the conversation puts it at the same place.
const TypeConsultDelivered Type = "consult_delivered"

// ConsultDelivered says the answer to consultation RequestID was put into
// the asker's conversation before its model call Key (step Step of the loop).
type ConsultDelivered struct {
	RequestID string `json:"request_id"`
	Key       string `json:"key"`
	Step      int    `json:"step"`
}

var consultTypes = map[Type]typeInfo{
	TypeConsultDelivered: entry[ConsultDelivered]("The answer to a non-blocking consultation was put into the asker's conversation, before the call named."),
}
