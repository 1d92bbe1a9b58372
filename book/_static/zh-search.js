/* The Chinese edition's search: segment the query as the index was segmented.
 *
 * The build cut every page into words with jieba, the terminology as its dictionary
 * (book/_ext/editions.py), but Sphinx's searchtools.js splits a query only at spaces and
 * punctuation: 注意力机制 or 代词消解 would be one word that no page has. This file, loaded
 * on the search page before searchtools.js, defines the two things searchtools.js keeps
 * when a page defines them first:
 *
 * - splitQuery: each run of Chinese characters is cut by maximum matching (forward and
 *   backward, the cut with fewer and longer words wins) over a dictionary of the index's
 *   own Chinese words and the terminology's; a synonym (层归一化, 教师强制, 池化...) becomes
 *   the book's term (层规范化, 强制教学, 汇聚); a one-character piece is kept only when it is
 *   a term (键, 值, 头), as the index does; a dictionary word that no page has as a word
 *   is searched as the index's words it is made of.
 * - Scorer: Sphinx's scores (the mean over the query's words), plus bonuses for how often
 *   the page uses the words for its length (ZH_SEARCH_DATA.counts and .lengths, counted by
 *   the build), for introducing the word's term (ZH_SEARCH_DATA.introduced: the first
 *   chapter that links its glossary entry), for a title that is about the word, and for
 *   writing the query's words as one phrase (ZH_SEARCH_DATA.pairs), so that the chapter
 *   about a term comes before a page that mentions it, or mentions its words apart.
 *
 * Plain JavaScript, no library, nothing fetched: ZH_SEARCH_DATA comes from
 * _static/zh-search-data.js, written by the build.
 */
"use strict";

var ZhSearch = (() => {
  const data = typeof ZH_SEARCH_DATA === "undefined" ? null : ZH_SEARCH_DATA;
  const HAN = /^\p{Script=Han}+$/u;
  const PIECES = /\p{Script=Han}+|[\p{Letter}\p{Number}_]+/gu;
  let dictionary = null;
  let indexed = null; // the index's own words
  let longest = 1;

  const load = () => {
    if (dictionary) return dictionary;
    dictionary = new Set();
    const add = (word) => {
      if (HAN.test(word)) {
        dictionary.add(word);
        longest = Math.max(longest, word.length);
      }
    };
    if (data) {
      data.words.forEach(add);
      Object.keys(data.synonyms).forEach(add);
      data.single.forEach(add);
    }
    const index = typeof Search !== "undefined" ? Search._index : null;
    indexed = new Set();
    if (index) {
      for (const word of [...Object.keys(index.terms), ...Object.keys(index.titleterms)])
        if (HAN.test(word)) {
          add(word);
          indexed.add(word);
        }
    }
    return dictionary;
  };

  // maximum matching from the left (backward = false) or from the right
  const match = (run, backward, words = dictionary) => {
    const found = [];
    let rest = run;
    while (rest.length) {
      let size = Math.min(longest, rest.length);
      for (; size > 1; size--) {
        const piece = backward ? rest.slice(rest.length - size) : rest.slice(0, size);
        if (words.has(piece)) break;
      }
      if (backward) {
        found.unshift(rest.slice(rest.length - size));
        rest = rest.slice(0, rest.length - size);
      } else {
        found.push(rest.slice(0, size));
        rest = rest.slice(size);
      }
    }
    return found;
  };

  const singles = (words) => words.filter((word) => word.length === 1).length;

  // the better of the two cuts: fewer words, then fewer single characters
  const cut = (run, words) => {
    const forward = match(run, false, words);
    const backward = match(run, true, words);
    if (forward.length !== backward.length)
      return forward.length < backward.length ? forward : backward;
    return singles(forward) < singles(backward) ? forward : backward;
  };

  const segment = (run) => {
    load();
    return dictionary.has(run) ? [run] : cut(run, dictionary);
  };

  // a word no page has as a word (a term the pages write in parts: 权重绑定 where a page
  // says 绑定) is searched as the index's words it is made of
  const inIndex = (word) =>
    indexed.has(word) || word.length < 3 || !HAN.test(word) ? [word] : cut(word, indexed);

  // the words searched for: synonyms replaced, one-character non-terms dropped
  const words = (query) => {
    const result = [];
    for (const piece of query.match(PIECES) || []) {
      if (!HAN.test(piece) || !data) {
        result.push(piece);
        continue;
      }
      const kept = [];
      for (const word of segment(piece)) {
        const target = data.synonyms[word] || word;
        for (const part of (target.match(PIECES) || []).flatMap(inIndex))
          if (part.length > 1 || data.single.includes(part)) kept.push(part);
      }
      // nothing left (only function characters): search the run as typed
      result.push(...(kept.length ? kept : [piece]));
    }
    return [...new Set(result)];
  };

  let current = [];
  let typed = "";
  const split = (query) => {
    typed = query.replace(/\s+/g, "");
    current = words(query);
    others = null;
    return current;
  };

  // Sphinx's score of a result (a word in the text 5, in a heading 15; for a query of
  // several words the mean over its words, where Sphinx takes the best one, so that a page
  // with one of them in a heading does not outrank a page about all of them), plus what
  // tells the page that teaches the query apart from the pages that use its words:
  // - how often the page uses the words for its length (BM25's saturating term frequency,
  //   k1 = 1.2, b = 0.75, over ZH_SEARCH_DATA.counts and .lengths): up to 4.4 points;
  // - 1 when the page introduces the word's term (the first chapter that links its entry);
  // - 2 when the page's own title has the query, a single word (注意力即汇聚 for 注意力,
  //   where 自注意力 is another word);
  // - 10, a heading's weight over the text's, when the page writes the query's words as one
  //   phrase (掩蔽自注意力, 编码器-解码器: ZH_SEARCH_DATA.pairs), which Sphinx scores as
  //   the best of its words alone;
  // a section whose title is the query as typed (键值注意力, 2.2) scores as a heading and a
  // phrase, 25, above the pages that only use the words;
  // an exercise page, which names the chapter's terms (in its task headings too) to ask for
  // the next step, ranks 15 points down, a heading's weight: below the chapter that explains
  // them, still in the results. Not for a query that is more than the book's terms (a term
  // of terminology.tsv belongs to the chapter that teaches it: 留一) when no other page has
  // the query in a heading (反向传播, which the chapters only mention and the exercises' task
  // headings name; the first exercise page that does gets LINKED), or when no other page
  // has every word of the query (头的重要性): then the exercise page is the page about it;
  // a query with a number (练习 2, 第 3 题), which the index does not hold, finds the pages
  // and sections whose title has the query as typed: they come first (TYPED).
  // Each weight is in units of Sphinx's own (5 for a word).
  const K1 = 1.2;
  const B = 0.75;
  const FREQUENCY = 2;
  const TITLE = 2;
  const LINKED = 1;
  const PHRASE = 10;
  const HEADING = 15;
  const TEXT = 5;
  const TYPED = 100;
  const isExercise = (docname) => docname.startsWith("book/exercises/");
  // whether a page (an index into the index's docnames) has the word in a heading, in its text
  // a Latin word is in the index as Sphinx's English stemmer cut it (translate: translat)
  let stemmer = null;
  const stem = (word) => {
    if (HAN.test(word) || typeof Stemmer === "undefined") return word;
    if (!stemmer) stemmer = new Stemmer();
    return stemmer.stemWord(word.toLowerCase());
  };
  const holds = (group, word, file) => {
    const files = group[stem(word)];
    return files !== undefined && (files === file || (files.length > 0 && files.includes(file)));
  };
  // the pages that are not exercise pages and have every word of the query, and those that
  // have them in headings: an exercise page defers to them; and the first exercise page that
  // has them in headings (computed once per query)
  let bookTerms = null;
  const book = () => {
    if (!bookTerms)
      bookTerms = new Set(data ? [...data.words, ...Object.values(data.synonyms), ...data.single] : []);
    return bookTerms;
  };
  let others = null;
  const otherPages = () => {
    if (others) return others;
    const index = Search._index;
    const files = index.docnames.map((_, file) => file);
    const all = (test, f) => current.every((word) => test(word, f));
    const anywhere = (w, f) => holds(index.terms, w, f) || holds(index.titleterms, w, f);
    const headed = (w, f) => holds(index.titleterms, w, f);
    const chapters = files.filter((f) => !isExercise(index.docnames[f]));
    others = {
      every: chapters.filter((f) => all(anywhere, f)),
      headed: chapters.filter((f) => all(headed, f)),
      first: files.find((f) => isExercise(index.docnames[f]) && all(headed, f)),
      // a query of the book's terms only (留一): the chapter that teaches them comes first
      terms: current.every((word) => book().has(word)),
    };
    return others;
  };
  // an exercise page's penalty (HEADING), 0 where it is the page about the query, and a
  // bonus (LINKED) for the first exercise page that has the query in its headings
  const exercise = (docname) => {
    if (!isExercise(docname)) return 0;
    if (!current.length || typeof Search === "undefined" || !Search._index) return HEADING;
    const index = Search._index;
    const file = index.docnames.indexOf(docname);
    const { every, headed, first, terms } = otherPages();
    const mine = (test) => current.every((word) => test(word));
    if (terms) return HEADING;
    if (mine((w) => holds(index.titleterms, w, file)) && !headed.length)
      return file === first ? -LINKED : 0;
    if (mine((w) => holds(index.terms, w, file) || holds(index.titleterms, w, file)) && !every.length)
      return 0;
    return HEADING;
  };
  // the query as typed, without spaces, in a result's title (the page's or the section's)
  const typedInTitle = (title) =>
    /\p{Number}/u.test(typed) && (title || "").replace(/<[^>]*>/g, "").replace(/\s+/g, "").includes(typed);
  // Sphinx's score of one word on one page (searchtools.js: Scorer.title, Scorer.term)
  const wordScore = (word, file) => {
    const has = (group) => {
      const files = group[word];
      return files !== undefined && (files === file || (files.length && files.includes(file)));
    };
    if (has(Search._index.titleterms)) return HEADING;
    return has(Search._index.terms) ? TEXT : 0;
  };
  let average = 0;
  const frequency = (count, length) => {
    if (!count) return 0;
    if (!average) {
      const lengths = data.lengths.filter((n) => n > 0);
      average = lengths.reduce((a, b) => a + b, 0) / lengths.length || 1;
    }
    return (count * (K1 + 1)) / (count + K1 * (1 - B + (B * length) / average));
  };
  // a result's section title: after the page's title and " > ", its number and markup removed
  const sectionTitle = (title) =>
    (title || "")
      .split(" > ")
      .pop()
      .replace(/<[^>]*>/g, "")
      .replace(/^[\d.\s]+/, "")
      .replace(/\s+/g, "");
  const titleWords = new Map();
  const wordsOfTitle = (title) => {
    if (!titleWords.has(title)) {
      const text = title.replace(/<[^>]*>/g, " ");
      const found = new Set();
      for (const run of text.match(/\p{Script=Han}+/gu) || [])
        for (const word of segment(run)) found.add(data.synonyms[word] || word);
      titleWords.set(title, found);
    }
    return titleWords.get(title);
  };
  const score = (result) => {
    const [docname, title, anchor, , sphinx] = result;
    if (typed && typedInTitle(title)) return TYPED + sphinx;
    if (anchor && typed && sectionTitle(title) === typed)
      return HEADING + PHRASE - exercise(docname);
    if (!data || anchor || !current.length) return sphinx - exercise(docname);
    const page = data.docnames.indexOf(docname);
    const base =
      current.length > 1
        ? current.reduce((sum, word) => sum + wordScore(word, page), 0) / current.length
        : sphinx;
    const length = (data.lengths || [])[page] || 0;
    let often = 0;
    let linked = 0;
    let titled = 0;
    const own = wordsOfTitle(title || "");
    for (const word of current) {
      often += frequency(((data.counts[word] || {})[page]) || 0, length);
      if ((data.introduced[word] || []).includes(page)) linked += 1;
      if (current.length === 1 && own.has(word)) titled += 1;
    }
    let phrases = 0;
    for (let i = 1; i < current.length; i++)
      if (((data.pairs || {})[`${current[i - 1]} ${current[i]}`] || {})[page]) phrases += 1;
    return (
      base +
      (FREQUENCY * often) / current.length +
      (LINKED * linked) / current.length +
      TITLE * titled +
      (current.length > 1 ? (PHRASE * phrases) / (current.length - 1) : 0) -
      exercise(docname)
    );
  };

  return { split, words, segment, score };
})();

var splitQuery = ZhSearch.split;

var Scorer = {
  // Sphinx's own weights (searchtools.js)
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
  score: ZhSearch.score,
};
