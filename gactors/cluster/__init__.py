"""gactors.cluster: placeholder for the Redis engine tests (CORE replaces it)."""
