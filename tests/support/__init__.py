"""What several test folders share: the Hub, S3 and judge doubles, hostile and mixed sources, the helpers
that run commands and check exports. Imported as ``tests.support.<module>``; no test module is imported by
another."""
