"""Optional integrations (agent frameworks, servers): they import the library, never the reverse."""
