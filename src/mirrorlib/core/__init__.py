"""The pure core: policies, records, offset translation, configuration, plans, the failover planner
and the values a running flow shares. It imports no Kafka client and does no I/O."""
