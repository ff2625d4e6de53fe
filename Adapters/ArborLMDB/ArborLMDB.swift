import Arbor
