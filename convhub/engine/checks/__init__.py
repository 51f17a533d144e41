"""What a build proves about its records: conversation ids unique, rejected records quarantined."""
