"""Telemetry schema, MQTT publisher/subscriber and brokers (issue: telemetry over MQTT)."""
