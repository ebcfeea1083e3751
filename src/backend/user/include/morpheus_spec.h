/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Specialization points for handler code (after Iridescent): the handler's
 * author names the values and conditions a specialized version may assume,
 * and the policy (backend/user/Policy.h: spec_space, specialize, the
 * exploration) picks, at run time, which ones to assume and with what value.
 *
 *   x = spec_enum("label", x, 2, 4, 8);   x is one of the listed values
 *   x = spec_range("label", x, 1, 16);    lo <= x <= hi
 *   x = spec_generic("label", x);         the policy names the values
 *   spec_assume("label", condition);      the condition may be assumed
 *
 * A point the policy leaves disabled is its input (an assumption: nothing),
 * in the generic handler and in every specialized one. An enabled point is
 * guarded: the specialized handler tests the input against the chosen value
 * (the condition for an assumption) where the point stands, and on a miss
 * calls the generic handler for the same packet and returns what it
 * returns; past the test the value is a constant the optimizer folds. So a
 * point may only stand where nothing has been written yet (packet bytes,
 * table entries, counters): the core declines a point that a write may
 * precede, and the handler stays generic there.
 *
 * The calls below are markers the core (core/SpecializationPoints.h)
 * recognises by name; nothing implements them: every version the runtime
 * JIT-compiles has them replaced. Labels are string literals; the candidate
 * values of spec_enum and the bounds of spec_range integer constants.
 */
#ifndef MORPHEUS_SPEC_H
#define MORPHEUS_SPEC_H

/* const: the optimizer of the handler's generic IR may move and merge them
 * like arithmetic, never drop one whose result is used. */
long long mu_spec_enum(const char *label, long long input, ...) __attribute__((const));
long long mu_spec_range(const char *label, long long input, long long low, long long high)
	__attribute__((const));
long long mu_spec_generic(const char *label, long long input) __attribute__((const));
int mu_spec_assume(const char *label, int condition) __attribute__((const));

#define spec_enum(label, x, ...)                                              \
	((__typeof__(x))mu_spec_enum((label), (long long)(x), __VA_ARGS__))
#define spec_range(label, x, low, high)                                       \
	((__typeof__(x))mu_spec_range((label), (long long)(x), (low), (high)))
#define spec_generic(label, x) ((__typeof__(x))mu_spec_generic((label), (long long)(x)))
/* The marker's result feeds an assumption the optimizer cannot see through
 * (the marker is opaque), which keeps the marker alive in the generic IR. */
#define spec_assume(label, condition)                                         \
	do {                                                                  \
		if (!mu_spec_assume((label), !!(condition)))                  \
			__builtin_unreachable();                              \
	} while (0)

#endif /* MORPHEUS_SPEC_H */
