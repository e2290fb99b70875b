"""The paper's router recipe (:mod:`.paper`), its frozen query encoders, its parameters and the universal router."""
