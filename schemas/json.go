package schemas

import "encoding/json"

// MarshalJSON renders the envelope as JSON with its payload decoded, for people
// and scripts (`sylk tail --json`). A payload that does not decode as its
// registered struct is rendered as whatever generic value it holds.
func (e *Envelope) MarshalJSON() ([]byte, error) {
	var payload any
	if p, err := DecodePayload(e); err == nil {
		payload = p
	} else if len(e.Payload) > 0 {
		s := getDecoder(e.Payload)
		payload, _ = s.dec.DecodeInterface()
		decoders.Put(s)
	}
	// plain has Envelope's fields without this method; the outer Payload shadows
	// the raw one.
	type plain Envelope
	return json.Marshal(struct {
		*plain
		Payload any `json:"payload"`
	}{(*plain)(e), payload})
}
