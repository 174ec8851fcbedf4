__version__ = "0.1.0"

SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
"""The schema URL of our tracer and meter: the one util-genai's handler records our model calls
under (`genai.inference`), so that `otel_agents` is one instrumentation scope (name, version and
schema URL) for every span and metric otel-agents makes."""
