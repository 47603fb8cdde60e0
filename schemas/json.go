package schemas

import "encoding/json"

// MarshalJSON renders the envelope as JSON with its payload decoded, for people
// and scripts (`sylk tail --json`). A payload that does not decode as its
// registered struct is rendered as whatever generic value it holds.
func (e *Envelope) MarshalJSON() ([]byte, error) {
	return e.MarshalJSONWith(nil)
}

// MarshalJSONWith is MarshalJSON for a reader that has the payload decoded
// already (p, as UnmarshalPayloadInto returns it), so that it is not decoded
// a second time; with a nil p it is decoded here.
func (e *Envelope) MarshalJSONWith(p any) ([]byte, error) {
	if p == nil {
		p = e.anyPayload()
	}
	// plain has Envelope's fields without this method; the outer Payload shadows
	// the raw one.
	type plain Envelope
	return json.Marshal(struct {
		*plain
		Payload any `json:"payload"`
	}{(*plain)(e), p})
}

// anyPayload is the payload decoded as its registered struct, or else as
// whatever generic value it holds.
func (e *Envelope) anyPayload() any {
	if p, err := DecodePayload(e); err == nil {
		return p
	}
	if len(e.Payload) == 0 {
		return nil
	}
	s := getDecoder(e.Payload)
	defer decoders.Put(s)
	v, _ := s.dec.DecodeInterface()
	return v
}
