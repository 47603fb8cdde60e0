package schemas

// A running server's configuration reloads. Both live in the system session.
const (
	TypeConfigChanged  Type = "config_changed"
	TypeConfigRejected Type = "config_rejected"
)

// configTypes are the configuration reload's types.
var configTypes = map[Type]typeInfo{
	TypeConfigChanged:  entry[ConfigChanged]("An edit of the config files was validated and taken by a running server: the keys it applied live, and those that wait for a restart."),
	TypeConfigRejected: entry[ConfigRejected]("An edit of the config files was refused, every problem listed; the server keeps the configuration it runs."),
}

// ConfigChanged is a reload that was taken. Applied are the changed keys in
// effect now (dotted, as in `sylk config show`); Restart the changed keys
// that take effect only when the server restarts.
type ConfigChanged struct {
	Files   []string `json:"files,omitempty"`
	Applied []string `json:"applied,omitempty"`
	Restart []string `json:"restart,omitempty"`
}

// ConfigRejected is a reload that was refused, with every problem found.
type ConfigRejected struct {
	Files    []string `json:"files,omitempty"`
	Problems []string `json:"problems,omitempty"`
}
