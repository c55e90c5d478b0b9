// Params and results of the Dialect's operations, one file per group of
// the interface: Schema (the engine, Admin): migrate, status, drop.

package dialect

// SchemaMigrateParams asks for the schema to be brought up to date.
type SchemaMigrateParams struct{}

// SchemaStatusParams asks which schema version the database is at.
type SchemaStatusParams struct{}

// SchemaStatus is the database's schema version and the latest this
// release knows; Current is 0 when no seqbox table exists yet.
type SchemaStatus struct {
	Current, Latest int
}

// SchemaDropParams asks for every table of the prefix to be dropped.
type SchemaDropParams struct{}
