"""The engines that run a build's shards: the local one and Spark, their processes and memory, and how work is cut."""
