package dialect

import "fmt"

// DefaultPrefix is the table prefix used when none is configured.
const DefaultPrefix = "seqbox_"

// ValidatePrefix checks a table prefix once, so that identifiers built from
// it never need quoting tricks: 1..32 characters of [a-z0-9_], starting with
// a letter or underscore.
func ValidatePrefix(prefix string) error {
	if len(prefix) == 0 || len(prefix) > 32 {
		return fmt.Errorf("%w %q: length must be 1..32", ErrInvalidPrefix, prefix)
	}
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		switch {
		case c >= 'a' && c <= 'z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return fmt.Errorf("%w %q: use lower-case letters, digits and '_', not starting with a digit", ErrInvalidPrefix, prefix)
		}
	}
	return nil
}

// Tables holds the full table names for one prefix.
type Tables struct {
	Prefix        string
	Partitions    string
	Body          string
	Incoming      string
	Outgoing      string
	Processor     string
	VacuumCounter string
	DeadLetters   string
	DedupKeys     string
	SchemaVersion string
	// Generations records the generations body and outgoing are rotated
	// in (docs/ROTATION.md). It is not in All: each dialect drops it with
	// the generations' tables.
	Generations string
}

// NewTables derives the table names from a validated prefix.
func NewTables(prefix string) (Tables, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return Tables{}, err
	}
	return Tables{
		Prefix:        prefix,
		Partitions:    prefix + "partitions",
		Body:          prefix + "body",
		Incoming:      prefix + "incoming",
		Outgoing:      prefix + "outgoing",
		Processor:     prefix + "processor",
		VacuumCounter: prefix + "vacuum_counter",
		DeadLetters:   prefix + "dead_letters",
		DedupKeys:     prefix + "dedup_keys",
		SchemaVersion: prefix + "schema_version",
		Generations:   prefix + "generations",
	}, nil
}

// All lists every table every dialect creates, in creation order.
func (t Tables) All() []string {
	return []string{t.SchemaVersion, t.Partitions, t.Body, t.Incoming, t.Outgoing, t.Processor, t.VacuumCounter, t.DeadLetters, t.DedupKeys}
}
