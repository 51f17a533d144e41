"""Build folders, local or at a URL: where they are, how a build is staged and moved into place."""
