package eventlog

// The test payloads have nothing to check, but the registry takes only
// Validators.

func (note) Validate() error       { return nil }
func (noteV2) Validate() error     { return nil }
func (secretNote) Validate() error { return nil }
func (vault) Validate() error      { return nil }
