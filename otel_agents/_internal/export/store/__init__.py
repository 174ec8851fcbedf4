"""The embedded store: its schema, the writer the app exports to, the reader the CLI reads with."""
