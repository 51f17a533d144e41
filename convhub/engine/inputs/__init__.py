"""The engine's where a source's files are: listing, downloads, zip members, digests."""
