package pipeline

// ParsePayload lets the external tests (which import the engine, and so cannot live in
// this package) read a payload as a worker would.
func ParsePayload(payload map[string]any) error {
	_, err := parsePayload(payload)
	return err
}
