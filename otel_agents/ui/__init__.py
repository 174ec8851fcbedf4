"""`otel-agents ui`: the web page over the embedded store (the optional extra `otel-agents[ui]`)."""
