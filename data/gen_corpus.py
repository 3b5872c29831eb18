#!/usr/bin/env python3
"""Write zbpp's demo training corpus: structured English-like text, deterministic in --seed.

The text is generated from small templates and a fixed table of "facts", so a tiny model has
real regularities to learn (spelling, grammar-like patterns, consistent facts, correct sums).
Documents are separated by <|endoftext|> (token 256 of the byte-level tokenizer).

    python3 data/gen_corpus.py                         # rewrites data/demo_corpus.txt
    python3 data/gen_corpus.py --shard demo.bin        # also writes an llm.c token shard

The committed data/demo_corpus.txt is the output of the first command.
"""
import argparse
import os
import random
import struct

EOT = "<|endoftext|>"

NAMES = ["Ada", "Ben", "Cleo", "Dev", "Elin", "Farid", "Greta", "Hugo", "Ines", "Jun", "Kofi",
         "Lena", "Milo", "Nora", "Omar", "Pia", "Quinn", "Rosa", "Sami", "Tove", "Umar", "Vera",
         "Wes", "Yara", "Zane"]
PLACES = ["a small village by the sea", "a busy town in the hills", "a quiet farm near the river",
          "a tall house at the edge of the forest", "a narrow street in the old city",
          "a cabin beside a frozen lake", "a green valley between two mountains"]
ANIMALS = {
    # name: (class, habitat, food, color, sound, legs)
    "cat": ("mammal", "houses and gardens", "fish and mice", "grey", "meows", 4),
    "dog": ("mammal", "houses and farms", "meat and bones", "brown", "barks", 4),
    "owl": ("bird", "old trees", "mice and insects", "brown", "hoots", 2),
    "frog": ("amphibian", "ponds", "flies", "green", "croaks", 4),
    "horse": ("mammal", "fields", "grass and hay", "black", "neighs", 4),
    "duck": ("bird", "lakes and rivers", "seeds and snails", "white", "quacks", 2),
    "bee": ("insect", "hives", "nectar", "yellow", "buzzes", 6),
    "fox": ("mammal", "forests", "rabbits and berries", "red", "yips", 4),
    "goat": ("mammal", "rocky hills", "leaves and grass", "white", "bleats", 4),
    "crow": ("bird", "fields and towns", "seeds and scraps", "black", "caws", 2),
    "snail": ("mollusc", "damp gardens", "leaves", "brown", "makes no sound", 0),
    "whale": ("mammal", "the ocean", "krill", "blue", "sings", 0),
}
OBJECTS = ["a red kite", "an old map", "a silver key", "a wooden box", "a lost boot",
           "a glass bottle", "a tiny boat", "a blue umbrella", "a broken clock", "a bag of seeds"]
LANDMARKS = ["the bridge", "the well", "the big oak tree", "the market", "the lighthouse",
             "the school", "the mill", "the harbour"]
ACTIVITIES = ["walk to the bakery", "feed the chickens", "read a book by the window",
              "paint pictures of the sky", "fix old bicycles", "sing while cooking soup",
              "count the boats in the harbour", "plant flowers in the garden"]
FEELINGS = ["happy", "surprised", "curious", "worried", "proud", "tired", "calm"]
ADJ = ["kind", "clever", "shy", "brave", "cheerful", "careful", "quiet", "funny"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
COLORS_OF = {"the sky": "blue", "grass": "green", "snow": "white", "coal": "black",
             "a lemon": "yellow", "a tomato": "red", "an orange": "orange", "a plum": "purple"}
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten", "eleven", "twelve"]


def story(r):
    name, friend = r.sample(NAMES, 2)
    animal = r.choice(list(ANIMALS))
    obj, mark = r.choice(OBJECTS), r.choice(LANDMARKS)
    s = [f"Once upon a time, there was a {r.choice(ADJ)} child named {name} who lived in "
         f"{r.choice(PLACES)}.",
         f"Every morning, {name} liked to {r.choice(ACTIVITIES)}.",
         f"One {r.choice(DAYS)}, {name} found {obj} near {mark}.",
         f"{name} felt {r.choice(FEELINGS)} and ran to tell {friend}."]
    if r.random() < 0.5:
        s.append(f'"Look what I found!" said {name}. "Where did it come from?" asked {friend}.')
    s.append(f"On the way, they met a {ANIMALS[animal][3]} {animal} that {ANIMALS[animal][4]}.")
    if r.random() < 0.5:
        s.append(f"The {animal} followed them all the way to {r.choice(LANDMARKS)}.")
    ending = r.choice([f"In the end, {name} and {friend} kept {obj} safe and became best friends.",
                       f"In the end, they gave {obj} to the people at {r.choice(LANDMARKS)}.",
                       f"That night, {name} fell asleep thinking about {obj}."])
    s.append(ending)
    return " ".join(s)


def animal_fact(r):
    animal = r.choice(list(ANIMALS))
    cls, habitat, food, color, sound, legs = ANIMALS[animal]
    lines = [f"The {animal} is a {cls}.", f"A {animal} lives in {habitat}.",
             f"The {animal} eats {food}.", f"Many {animal}s are {color}.",
             f"The {animal} {sound}.",
             f"A {animal} has {NUMBER_WORDS[legs] if legs <= 12 else legs} legs."]
    r.shuffle(lines)
    return f"Facts about the {animal}: " + " ".join(lines[:r.randint(3, len(lines))])


def arithmetic(r):
    out = []
    for _ in range(r.randint(4, 10)):
        op = r.choice("+-*")
        a, b = r.randint(0, 20), r.randint(0, 20)
        if op == "-" and b > a:
            a, b = b, a
        val = a + b if op == "+" else a - b if op == "-" else a * b
        out.append(f"{a} {op} {b} = {val}")
    return "Arithmetic practice:\n" + "\n".join(out)


def questions(r):
    out = []
    for _ in range(r.randint(3, 6)):
        kind = r.randrange(4)
        if kind == 0:
            thing = r.choice(list(COLORS_OF))
            out.append(f"Q: What color is {thing}?\nA: {thing[0].upper() + thing[1:]} is "
                       f"{COLORS_OF[thing]}.")
        elif kind == 1:
            i = r.randrange(7)
            out.append(f"Q: What day comes after {DAYS[i]}?\nA: After {DAYS[i]} comes "
                       f"{DAYS[(i + 1) % 7]}.")
        elif kind == 2:
            i = r.randrange(12)
            out.append(f"Q: Which month follows {MONTHS[i]}?\nA: {MONTHS[(i + 1) % 12]} follows "
                       f"{MONTHS[i]}.")
        else:
            animal = r.choice(list(ANIMALS))
            out.append(f"Q: Where does the {animal} live?\nA: The {animal} lives in "
                       f"{ANIMALS[animal][1]}.")
    return "\n".join(out)


def counting(r):
    start = r.randint(0, 6)
    n = r.randint(4, 7)
    words = NUMBER_WORDS[start:start + n]
    digits = [str(i) for i in range(start, start + len(words))]
    return f"Counting: {', '.join(words)}. In digits: {', '.join(digits)}."


def diary(r):
    name = r.choice(NAMES)
    month, day = r.choice(MONTHS), r.randint(1, 28)
    weather = r.choice(["sunny", "rainy", "windy", "cold", "warm", "cloudy"])
    return (f"Dear diary, today is {r.choice(DAYS)}, {month} {day}. The weather was {weather}. "
            f"I went to {r.choice(LANDMARKS)} with {name} and we tried to {r.choice(ACTIVITIES)}. "
            f"I feel {r.choice(FEELINGS)}.")


KINDS = [(story, 5), (animal_fact, 3), (arithmetic, 2), (questions, 3), (counting, 1), (diary, 2)]


def generate(seed, target_bytes):
    r = random.Random(seed)
    makers = [m for m, w in KINDS for _ in range(w)]
    docs, size = [], 0
    while size < target_bytes:
        doc = r.choice(makers)(r) + "\n"
        docs.append(doc)
        size += len(doc) + len(EOT)
    return EOT.join(docs)


def encode(text):
    """Byte-level tokens, matching zb_tok_encode: bytes, with <|endoftext|> as 256."""
    out = []
    for i, piece in enumerate(text.split(EOT)):
        if i:
            out.append(256)
        out.extend(piece.encode("utf-8"))
    return out


def write_shard(path, tokens):
    header = [20240520, 1, len(tokens)] + [0] * 253
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))
    os.replace(tmp, path)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20240520)
    ap.add_argument("--bytes", type=int, default=400_000, help="approximate corpus size")
    ap.add_argument("--out", default=os.path.join(here, "demo_corpus.txt"))
    ap.add_argument("--shard", help="also write an llm.c token shard here")
    args = ap.parse_args()
    text = generate(args.seed, args.bytes)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    if args.shard:
        write_shard(args.shard, encode(text))


if __name__ == "__main__":
    main()
