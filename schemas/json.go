package schemas

// MarshalJSON renders the envelope as JSON with its payload decoded, for people
// and scripts (`sylk tail --json`). A payload that does not decode as its
// registered struct is rendered as whatever generic value it holds.
func (e *Envelope) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil, nil)
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
