"""Span placement: the registry of runs' spans, the run-aware tracers, run state, and which recording is current."""
