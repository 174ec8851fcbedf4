"""The settings: one table of every setting, its parsers, and their resolution (argument, variable, default)."""
