"""The configs every source publishes (sessions, turns, qa, messages), each defined once."""
