"""Reliability suite (issue 8): a model-based test of supervision, fault injection and
bad inputs. The fault catalogue these tests pin down is ``docs/reliability.md``."""
