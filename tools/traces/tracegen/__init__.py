"""Trace generation for Morpheus benchmarks: flow sets derived from the network
functions' configurations, locality models, pcap and flow-index output."""
from .flows import Flow, ConfigError, load_flows, SOURCES
from .locality import parse_model, parse_phases, generate, Phase
from .pcap import build_frame, parse_frame, write_pcap, read_pcap, checksum
from .index import write_index, read_index

__all__ = ["Flow", "ConfigError", "load_flows", "SOURCES", "parse_model",
           "parse_phases", "generate", "Phase", "build_frame", "parse_frame",
           "write_pcap", "read_pcap", "checksum", "write_index", "read_index"]
