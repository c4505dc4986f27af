"""simtrain: discrete-event simulator of LLM training clusters."""
