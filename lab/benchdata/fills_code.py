"""Small Python functions written for `python -m engine bench fills` (not from the corpora).

Each item: `source` (the complete, correct function), `masked` (one line of it, without its
indentation: the benchmark masks exactly that stretch, after the indentation) and `tests` (asserts
that pass with the original line). A fill passes when the program with the filled line passes its
tests in a separate interpreter with a timeout.
"""

CODE_ITEMS: list[dict[str, str]] = [
    {"source": 'def add(a, b):\n    """Return the sum of a and b."""\n    return a + b\n',
     "masked": "return a + b",
     "tests": "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"},
    {"source": 'def is_even(n):\n    """True when n is even."""\n    return n % 2 == 0\n',
     "masked": "return n % 2 == 0",
     "tests": "assert is_even(4)\nassert not is_even(7)\nassert is_even(0)\n"},
    {"source": 'def square(x):\n    """Return x squared."""\n    return x * x\n',
     "masked": "return x * x",
     "tests": "assert square(3) == 9\nassert square(-4) == 16\n"},
    {"source": 'def max_of_three(a, b, c):\n    """The largest of three numbers."""\n    return max(a, b, c)\n',
     "masked": "return max(a, b, c)",
     "tests": "assert max_of_three(1, 5, 3) == 5\nassert max_of_three(-1, -5, -3) == -1\n"},
    {"source": 'def reverse_string(s):\n    """Return s reversed."""\n    return s[::-1]\n',
     "masked": "return s[::-1]",
     "tests": "assert reverse_string('abc') == 'cba'\nassert reverse_string('') == ''\n"},
    {"source": 'def count_vowels(s):\n    """How many vowels s contains."""\n    count = 0\n    for ch in s.lower():\n'
               '        if ch in "aeiou":\n            count += 1\n    return count\n',
     "masked": "count += 1",
     "tests": "assert count_vowels('Hello World') == 3\nassert count_vowels('xyz') == 0\n"},
    {"source": 'def factorial(n):\n    """n! for n >= 0."""\n    result = 1\n    for i in range(2, n + 1):\n'
               '        result *= i\n    return result\n',
     "masked": "result *= i",
     "tests": "assert factorial(0) == 1\nassert factorial(5) == 120\n"},
    {"source": 'def fib(n):\n    """The n-th Fibonacci number (fib(0) == 0)."""\n    a, b = 0, 1\n    for _ in range(n):\n'
               '        a, b = b, a + b\n    return a\n',
     "masked": "a, b = b, a + b",
     "tests": "assert fib(0) == 0\nassert fib(1) == 1\nassert fib(10) == 55\n"},
    {"source": 'def mean(xs):\n    """The arithmetic mean of a non-empty list."""\n    return sum(xs) / len(xs)\n',
     "masked": "return sum(xs) / len(xs)",
     "tests": "assert mean([1, 2, 3]) == 2\nassert mean([5]) == 5\n"},
    {"source": 'def first_word(s):\n    """The first word of a sentence."""\n    return s.split()[0]\n',
     "masked": "return s.split()[0]",
     "tests": "assert first_word('hello big world') == 'hello'\nassert first_word('  one') == 'one'\n"},
    {"source": 'def celsius_to_fahrenheit(c):\n    """Convert degrees Celsius to Fahrenheit."""\n    return c * 9 / 5 + 32\n',
     "masked": "return c * 9 / 5 + 32",
     "tests": "assert celsius_to_fahrenheit(0) == 32\nassert celsius_to_fahrenheit(100) == 212\n"},
    {"source": 'def is_palindrome(s):\n    """True when s reads the same backwards (case ignored)."""\n    s = s.lower()\n'
               '    return s == s[::-1]\n',
     "masked": "return s == s[::-1]",
     "tests": "assert is_palindrome('Level')\nassert not is_palindrome('python')\n"},
    {"source": 'def flatten(lists):\n    """Concatenate a list of lists into one list."""\n    out = []\n    for xs in lists:\n'
               '        out.extend(xs)\n    return out\n',
     "masked": "out.extend(xs)",
     "tests": "assert flatten([[1, 2], [3], []]) == [1, 2, 3]\nassert flatten([]) == []\n"},
    {"source": 'def unique(xs):\n    """The items of xs without repeats, in first-seen order."""\n'
               '    seen = set()\n    out = []\n    for x in xs:\n'
               '        if x not in seen:\n            seen.add(x)\n            out.append(x)\n'
               '    return out\n',
     "masked": "out.append(x)",
     "tests": "assert unique([3, 1, 3, 2, 1]) == [3, 1, 2]\nassert unique([]) == []\n"},
    {"source": 'def clamp(x, lo, hi):\n    """Limit x to the range [lo, hi]."""\n    return max(lo, min(x, hi))\n',
     "masked": "return max(lo, min(x, hi))",
     "tests": "assert clamp(5, 0, 10) == 5\nassert clamp(-3, 0, 10) == 0\nassert clamp(42, 0, 10) == 10\n"},
    {"source": 'def word_count(text):\n    """How many whitespace-separated words text has."""\n    return len(text.split())\n',
     "masked": "return len(text.split())",
     "tests": "assert word_count('a b  c') == 3\nassert word_count('') == 0\n"},
    {"source": 'def sum_of_squares(n):\n    """1*1 + 2*2 + ... + n*n."""\n    return sum(i * i for i in range(1, n + 1))\n',
     "masked": "return sum(i * i for i in range(1, n + 1))",
     "tests": "assert sum_of_squares(3) == 14\nassert sum_of_squares(0) == 0\n"},
    {"source": 'def last(xs):\n    """The last item of a non-empty list."""\n    return xs[-1]\n',
     "masked": "return xs[-1]",
     "tests": "assert last([1, 2, 3]) == 3\nassert last(['a']) == 'a'\n"},
    {"source": 'def word_frequencies(text):\n    """Map each word of text to how often it occurs."""\n    counts = {}\n'
               '    for w in text.split():\n        counts[w] = counts.get(w, 0) + 1\n    return counts\n',
     "masked": "counts[w] = counts.get(w, 0) + 1",
     "tests": "assert word_frequencies('a b a') == {'a': 2, 'b': 1}\nassert word_frequencies('') == {}\n"},
    {"source": 'def is_prime(n):\n    """True when n is a prime number."""\n    if n < 2:\n        return False\n'
               '    for d in range(2, int(n ** 0.5) + 1):\n        if n % d == 0:\n            return False\n'
               '    return True\n',
     "masked": "if n % d == 0:",
     "tests": "assert is_prime(2) and is_prime(13)\nassert not is_prime(1) and not is_prime(15)\n"},
    {"source": 'def capitalize_words(s):\n    """Capitalize every word of s."""\n'
               '    return " ".join(w.capitalize() for w in s.split())\n',
     "masked": 'return " ".join(w.capitalize() for w in s.split())',
     "tests": "assert capitalize_words('hello big world') == 'Hello Big World'\n"},
    {"source": 'def gcd(a, b):\n    """Greatest common divisor of two non-negative integers."""\n    while b:\n'
               '        a, b = b, a % b\n    return a\n',
     "masked": "a, b = b, a % b",
     "tests": "assert gcd(12, 18) == 6\nassert gcd(7, 0) == 7\nassert gcd(17, 5) == 1\n"},
    {"source": 'def absolute(x):\n    """The absolute value of x."""\n    if x < 0:\n        return -x\n    return x\n',
     "masked": "return -x",
     "tests": "assert absolute(-3) == 3\nassert absolute(4) == 4\n"},
    {"source": 'def contains(xs, item):\n    """True when item is in xs."""\n    return item in xs\n',
     "masked": "return item in xs",
     "tests": "assert contains([1, 2], 2)\nassert not contains([], 1)\n"},
    {"source": 'def min_index(xs):\n    """The index of the smallest item of a non-empty list."""\n'
               '    return xs.index(min(xs))\n',
     "masked": "return xs.index(min(xs))",
     "tests": "assert min_index([3, 1, 2]) == 1\nassert min_index([5]) == 0\n"},
    {"source": 'def count_positive(xs):\n    """How many items of xs are greater than zero."""\n'
               '    return sum(1 for x in xs if x > 0)\n',
     "masked": "return sum(1 for x in xs if x > 0)",
     "tests": "assert count_positive([1, -2, 3, 0]) == 2\nassert count_positive([]) == 0\n"},
]
