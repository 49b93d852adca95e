"""Stand-in package (tests/support/neuron_sdk_standin/README.md): re-exports nothing, as upstream's."""
