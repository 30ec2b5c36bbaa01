package bench

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A Task is a set of prompts to evaluate every mode on. When its items
// carry a Check, the evaluation reports accuracy per mode at equal compute
// besides the quality metrics every task gets.
type Task interface {
	// Name identifies the task in reports ("stories", "gsm8k", ...).
	Name() string
	// Items returns the first limit items (all of them when limit <= 0),
	// in a fixed order.
	Items(limit int) ([]Item, error)
}

// An Item is one prompt of a task.
type Item struct {
	ID     string
	Prompt string
	// Answer is the expected answer, for reports ("" when there is none).
	Answer string
	// Check reports whether a completion (the generated text, without
	// the prompt) is correct; nil for items judged by quality metrics
	// only.
	Check func(completion string) bool
	// Group labels the item's kind ("3 steps"); the evaluation breaks a
	// checked task's accuracy down by group when its items have one.
	Group string
}

// NewTask returns a task over a fixed list of items: the simplest way to
// plug a verifiable task into the evaluation.
func NewTask(name string, items []Item) Task { return &listTask{name: name, items: items} }

type listTask struct {
	name  string
	items []Item
}

func (t *listTask) Name() string { return t.name }

func (t *listTask) Items(limit int) ([]Item, error) { return firstN(t.items, limit), nil }

// firstN returns a copy of the first n items, or all when n <= 0.
func firstN(items []Item, n int) []Item {
	if n > 0 && n < len(items) {
		items = items[:n]
	}
	return slices.Clone(items)
}

// Stories is the task of the default report: the 50 story openings of
// StoryPrompts, without a check; they are judged by the log-likelihood,
// repetition and diversity of their continuations.
func Stories() Task {
	items := make([]Item, len(storyPrompts))
	for i, p := range storyPrompts {
		items[i] = Item{ID: fmt.Sprintf("story-%02d", i+1), Prompt: p}
	}
	return NewTask("stories", items)
}

// recallNames are names stories260K has seen often in TinyStories.
var recallNames = []string{
	"Lily", "Tom", "Ben", "Sue", "Max", "Anna", "Mia", "Sam", "Lucy", "Jack",
	"Tim", "Sara", "Amy", "Bob", "Emma", "Zoe", "Spot", "Kitty", "Jane", "Timmy",
}

// recallTemplates introduce a character by name and stop where a story
// would go on about them.
var recallTemplates = []string{
	"Once upon a time, there was a little %s named %s. One day,",
	"%[2]s was a happy %[1]s. Every morning,",
}

var recallKinds = []string{"girl", "boy", "dog", "cat", "bunny"}

// NameRecall is a small synthetic task that exercises the task interface
// cheaply enough for CI: the prompt introduces a character by name (for
// example "Once upon a time, there was a little girl named Mia. One
// day,"), and a completion is correct when it names the character again,
// as a whole word. A story model does this often but not always, so the
// accuracy is neither 0 nor 1 even for stories260K. It has 40 items.
func NameRecall() Task {
	var items []Item
	for ti, tmpl := range recallTemplates {
		for ni, name := range recallNames {
			kind := recallKinds[(ni+ti)%len(recallKinds)]
			items = append(items, Item{
				ID:     fmt.Sprintf("name-recall-%02d", len(items)+1),
				Prompt: fmt.Sprintf(tmpl, kind, name),
				Answer: name,
				Check:  func(c string) bool { return ContainsWord(c, name) },
			})
		}
	}
	return NewTask("name-recall", items)
}

// ContainsWord reports whether word occurs in s delimited by non-letters
// and non-digits on both sides (so "Tom" is in "Tom's hat" but not in
// "Tommy").
func ContainsWord(s, word string) bool {
	if word == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(s[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		before, _ := utf8.DecodeLastRuneInString(s[:start])
		after, _ := utf8.DecodeRuneInString(s[end:])
		if (start == 0 || !isWordRune(before)) && (end == len(s) || !isWordRune(after)) {
			return true
		}
		i = start + 1
	}
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
