"""The LLM runtime: the chat contract, the embedded model, its process and server, and the backend a setting names."""
