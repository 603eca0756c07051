"""Cantilever beam with a tip load (Euler-Bernoulli). Every quantity in SI units."""


def cantilever(length, force, youngs_modulus, second_moment):
    return {
        "deflection": force * length**3 / (3 * youngs_modulus * second_moment),
        "moment": force * length,
        "shear": force,
    }
