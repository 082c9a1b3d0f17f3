//! Workload 4, hash-table-heavy: a text indexer over generated documents.
//!
//! Documents are sentences of words drawn from a Zipf distribution over a generated vocabulary
//! (with capitals, punctuation and numbers). The indexer tokenizes and lowercases each
//! document, interns every word in a `std::collections::HashMap<String, u32>`, counts words and
//! bigrams (a `HashMap<u64, u32>`), builds an inverted index (word → sorted document ids), then
//! answers two-word AND queries by intersecting posting lists, and ranks the top words.
//!
//! Instrumentation: the tokenizer `next_word` and the posting-list `intersect` are
//! `#[profile(paths)]`; `index_doc`, `intern`, `count_bigram`, `post`, `query` and `top_words`
//! are `#[profile]`.

use crate::rng::Rng;
use crate::Size;

/// `(vocabulary, documents, words per document, queries)` for `size`.
pub fn shape(size: Size) -> (usize, usize, usize, usize) {
    size.pick(
        (2_000, 25, 300, 10),
        (8_000, 600, 300, 200),
        (20_000, 3_000, 300, 2_000),
    )
}

const SYLLABLES: [&str; 32] = [
    "ka", "to", "ri", "men", "sa", "lo", "ve", "dar", "ni", "qu", "es", "tor", "ab", "li", "ber",
    "con", "stra", "pe", "ul", "ix", "mo", "gen", "ta", "ur", "fi", "do", "pla", "ce", "on", "ha",
    "wy", "ze",
];

/// The generated corpus: documents and query word pairs.
#[derive(Clone, Debug)]
pub struct Corpus {
    /// The documents, each a line of words.
    pub docs: Vec<String>,
    /// Pairs of words to look up together.
    pub queries: Vec<(String, String)>,
}

/// Zipf sampling by inversion with a guide table (Chen and Asau): `guide[k]` is the first rank
/// whose cumulative probability reaches `k / guide.len()`, so a draw scans O(1) ranks.
struct Zipf {
    cdf: Vec<f64>,
    guide: Vec<u32>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Zipf {
        let mut acc = 0.0;
        let mut cdf = Vec::with_capacity(n);
        for r in 0..n {
            acc += 1.0 / ((r + 1) as f64).powf(s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        let mut guide = Vec::with_capacity(n);
        let mut r = 0;
        for k in 0..n {
            let q = k as f64 / n as f64;
            while r + 1 < n && cdf[r] < q {
                r += 1;
            }
            guide.push(r as u32);
        }
        Zipf { cdf, guide }
    }

    fn sample(&self, rng: &mut Rng) -> usize {
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mut r = self.guide[(u * self.guide.len() as f64) as usize] as usize;
        while r + 1 < self.cdf.len() && self.cdf[r] < u {
            r += 1;
        }
        r
    }
}

/// The corpus for `size`, from a fixed seed.
pub fn corpus(size: Size) -> Corpus {
    let (nvocab, ndocs, words, nqueries) = shape(size);
    let mut rng = Rng::new(0x7E47_1D3C);
    let mut vocab = Vec::with_capacity(nvocab);
    let mut seen = std::collections::HashSet::new();
    while vocab.len() < nvocab {
        let mut w = String::new();
        for _ in 0..rng.range(1, 5) {
            w.push_str(rng.pick(&SYLLABLES));
        }
        if rng.chance(1, 40) {
            w.push_str("'s");
        }
        if seen.insert(w.clone()) {
            vocab.push(w);
        }
    }
    let zipf = Zipf::new(nvocab, 1.05);
    let mut docs = Vec::with_capacity(ndocs);
    for _ in 0..ndocs {
        let mut d = String::with_capacity(words * 8);
        let mut sentence_start = true;
        for i in 0..words {
            if i > 0 {
                d.push(' ');
            }
            if rng.chance(1, 60) {
                d.push_str(&rng.below(3000).to_string());
            } else {
                let w = &vocab[zipf.sample(&mut rng)];
                if sentence_start || rng.chance(1, 30) {
                    let mut cs = w.chars();
                    let first = cs.next().expect("non-empty word");
                    d.push(first.to_ascii_uppercase());
                    d.push_str(cs.as_str());
                } else {
                    d.push_str(w);
                }
            }
            sentence_start = false;
            match rng.below(40) {
                0..=2 => d.push(','),
                3 | 4 => {
                    d.push_str(rng.pick(&[".", ".", "!", "?", ";"]));
                    sentence_start = true;
                }
                5 => d.push_str(" -"),
                _ => {}
            }
        }
        d.push('.');
        docs.push(d);
    }
    let queries = (0..nqueries)
        .map(|_| {
            // Query terms skew to the middle of the distribution so intersections vary.
            let a = zipf.sample(&mut rng) + rng.below(50) as usize;
            let b = zipf.sample(&mut rng) + rng.below(200) as usize;
            (vocab[a % nvocab].clone(), vocab[b % nvocab].clone())
        })
        .collect();
    Corpus { docs, queries }
}

macro_rules! code {
    (call: [$($call:meta)?], paths: [$($paths:meta)?], memory: [$($memory:meta)?]) => {
        use crate::rng::mix;
        use crate::Size;
        use std::collections::HashMap;

        /// Splits a document into lowercase words (letters, digits and inner apostrophes).
        struct Words<'a> {
            bytes: &'a [u8],
            pos: usize,
        }

        impl<'a> Words<'a> {
            /// The next word, lowercased into `out`; false at the end.
            $(#[$paths])?
            fn next_word(&mut self, out: &mut String) -> bool {
                out.clear();
                let b = self.bytes;
                while self.pos < b.len() && !b[self.pos].is_ascii_alphanumeric() {
                    self.pos += 1;
                }
                while self.pos < b.len() {
                    let c = b[self.pos];
                    if c.is_ascii_lowercase() || c.is_ascii_digit() {
                        out.push(c as char);
                    } else if c.is_ascii_uppercase() {
                        out.push(c.to_ascii_lowercase() as char);
                    } else if c == b'\''
                        && self.pos + 1 < b.len()
                        && b[self.pos + 1].is_ascii_alphabetic()
                    {
                        out.push('\'');
                    } else {
                        break;
                    }
                    self.pos += 1;
                }
                !out.is_empty()
            }
        }

        #[derive(Default)]
        struct Index {
            ids: HashMap<String, u32>,
            names: Vec<String>,
            counts: Vec<u64>,
            bigrams: HashMap<u64, u32>,
            postings: Vec<Vec<u32>>,
            tokens: u64,
        }

        impl Index {
            $(#[$call])?
            fn intern(&mut self, word: &str) -> u32 {
                if let Some(&id) = self.ids.get(word) {
                    return id;
                }
                let id = self.names.len() as u32;
                self.ids.insert(word.to_owned(), id);
                self.names.push(word.to_owned());
                self.counts.push(0);
                self.postings.push(Vec::new());
                id
            }

            $(#[$call])?
            fn count_bigram(&mut self, a: u32, b: u32) {
                *self.bigrams.entry(((a as u64) << 32) | b as u64).or_insert(0) += 1;
            }

            $(#[$call])?
            fn post(&mut self, word: u32, doc: u32) {
                let list = &mut self.postings[word as usize];
                if list.last() != Some(&doc) {
                    list.push(doc);
                }
            }

            $(#[$call])?
            fn index_doc(&mut self, doc: u32, text: &str) {
                let mut words = Words { bytes: text.as_bytes(), pos: 0 };
                let mut w = String::with_capacity(32);
                let mut prev = None;
                while words.next_word(&mut w) {
                    let id = self.intern(&w);
                    self.counts[id as usize] += 1;
                    self.tokens += 1;
                    if let Some(p) = prev {
                        self.count_bigram(p, id);
                    }
                    self.post(id, doc);
                    prev = Some(id);
                }
            }

            /// Documents containing both words.
            $(#[$call])?
            fn query(&self, a: &str, b: &str) -> usize {
                match (self.ids.get(a), self.ids.get(b)) {
                    (Some(&x), Some(&y)) => {
                        intersect(&self.postings[x as usize], &self.postings[y as usize])
                    }
                    _ => 0,
                }
            }

            /// The `k` most frequent words, most frequent first (ties by word).
            $(#[$call])?
            fn top_words(&self, k: usize) -> Vec<(u64, &str)> {
                let mut all: Vec<(u64, &str)> =
                    self.names.iter().zip(&self.counts).map(|(n, &c)| (c, n.as_str())).collect();
                all.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(y.1)));
                all.truncate(k);
                all
            }
        }

        /// The size of the intersection of two sorted lists.
        $(#[$paths])?
        fn intersect(p: &[u32], q: &[u32]) -> usize {
            let (mut i, mut j, mut n) = (0, 0, 0);
            while i < p.len() && j < q.len() {
                if p[i] < q[j] {
                    i += 1;
                } else if p[i] > q[j] {
                    j += 1;
                } else {
                    n += 1;
                    i += 1;
                    j += 1;
                }
            }
            n
        }

        /// Index the corpus for `size` and answer its queries; the checksum of the
        /// vocabulary, the top words, the bigram count and the query answers.
        pub fn run(size: Size) -> u64 {
            let corpus = super::corpus(std::hint::black_box(size));
            let mut index = Index::default();
            for (d, text) in corpus.docs.iter().enumerate() {
                index.index_doc(d as u32, text);
            }
            let mut h = mix(index.names.len() as u64, index.tokens);
            h = mix(h, index.bigrams.len() as u64);
            for (a, b) in &corpus.queries {
                h = mix(h, index.query(a, b) as u64);
            }
            for (c, w) in index.top_words(50) {
                h = mix(h, c);
                for byte in w.bytes() {
                    h = mix(h, byte as u64);
                }
            }
            h
        }
    };
}

twins!(code);
