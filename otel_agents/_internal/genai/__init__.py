"""What a model call and a run record: content policy, prices, instruments, loop rules, util-genai's inference."""
