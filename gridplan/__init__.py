"""gridplan: decision-aware evaluation of world models (the DRPE paper's laboratory).

Shape legend: ``B`` episodes, ``L`` leaves = 4^D, ``D`` depth, ``H`` horizon, ``S`` = 12 dims.
"""

__version__ = "0.1.0"
