import sys
from pathlib import Path

# Tests import the package from the repository root without installing it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
