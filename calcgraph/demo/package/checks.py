"""Strength and stiffness checks of a beam, and the verdict that combines them."""

# A cantilever's tip deflection is commonly limited to span / 125 (twice span / 250).
DEFLECTION_LIMIT_DIVISOR = 125.0


def stress_check(moment, section_modulus, yield_stress):
    stress = abs(moment) / section_modulus
    return {"stress": stress, "utilisation": stress / yield_stress}


def deflection_check(deflection, length):
    return abs(deflection) / (length / DEFLECTION_LIMIT_DIVISOR)


def verdict(utilisation, deflection_ratio):
    governing = "strength" if utilisation >= deflection_ratio else "stiffness"
    worst = max(utilisation, deflection_ratio)
    safety_factor = float("inf") if worst == 0 else 1.0 / worst
    outcome = "PASS" if worst <= 1.0 else "FAIL"
    return {"safety_factor": safety_factor, "verdict": f"{outcome} ({governing} governs)"}
