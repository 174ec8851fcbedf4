"""A run: how it starts, its workflow span, the stream it follows, its stop reason and its attribution."""
