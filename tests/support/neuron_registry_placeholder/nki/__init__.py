# Imitates the public registry's `nki` 0.0.1 placeholder (tests only): its import raises this.
raise ImportError("WRONG PACKAGE. Please install the package from Neuron Repository - pip.repos.neuron.amazonaws.com")
