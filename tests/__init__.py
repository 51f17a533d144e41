"""convhub's tests, laid out as the code they test; shared helpers and test doubles are in ``tests.support``."""
