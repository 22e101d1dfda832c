"""Redis Cluster: the suite's cluster mode, durability, failover, and sharded queues."""
