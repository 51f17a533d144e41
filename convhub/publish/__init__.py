"""`convhub push`: a built folder to a Hub dataset repo, deleting only what convhub published."""
