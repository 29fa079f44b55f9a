"""nbval does not run the Chinese notebooks: their code cells and outputs are the English notebooks',
byte for byte (`python -m tools.translations --check`, part of `make test`, verifies that), and
`make nbval` already runs those."""

collect_ignore_glob = ["*.ipynb", "exercises/*.ipynb"]
