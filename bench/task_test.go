package bench

import (
	"fmt"
	"strings"
	"testing"
)

func TestStories(t *testing.T) {
	task := Stories()
	items, err := task.Items(0)
	if err != nil {
		t.Fatal(err)
	}
	if task.Name() != "stories" || len(items) != 50 {
		t.Fatalf("%s: %d items, want 50", task.Name(), len(items))
	}
	ids, prompts := map[string]bool{}, map[string]bool{}
	for _, it := range items {
		if ids[it.ID] || prompts[it.Prompt] {
			t.Errorf("duplicate item %s %q", it.ID, it.Prompt)
		}
		ids[it.ID], prompts[it.Prompt] = true, true
		if strings.TrimSpace(it.Prompt) != it.Prompt || it.Prompt == "" {
			t.Errorf("%s: prompt %q has surrounding space or is empty", it.ID, it.Prompt)
		}
		if it.Check != nil || it.Answer != "" {
			t.Errorf("%s: a story has no answer", it.ID)
		}
	}
	first, err := task.Items(3)
	if err != nil || len(first) != 3 || first[2].ID != items[2].ID {
		t.Errorf("Items(3) = %d items, %v", len(first), err)
	}
	// The items are copies: changing them changes nothing in the task.
	first[0].Prompt = "changed"
	if again, _ := task.Items(1); again[0].Prompt == "changed" {
		t.Error("Items returned the task's own slice")
	}
	if p := StoryPrompts(); len(p) != 50 || p[0] != items[0].Prompt {
		t.Errorf("StoryPrompts() = %d prompts", len(p))
	}
}

func TestNameRecall(t *testing.T) {
	items, err := NameRecall().Items(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 40 {
		t.Fatalf("%d items, want 40", len(items))
	}
	for _, it := range items {
		if !strings.Contains(it.Prompt, it.Answer) || it.Check == nil {
			t.Fatalf("%s: prompt %q does not name %q, or has no check", it.ID, it.Prompt, it.Answer)
		}
		if !it.Check(fmt.Sprintf(" Then %s smiled.", it.Answer)) {
			t.Errorf("%s: a completion naming %s fails", it.ID, it.Answer)
		}
		if it.Check(" Then they went home.") {
			t.Errorf("%s: a completion without %s passes", it.ID, it.Answer)
		}
	}
	if items[0].Prompt != "Once upon a time, there was a little girl named Lily. One day," {
		t.Errorf("first prompt %q", items[0].Prompt)
	}
}

func TestContainsWord(t *testing.T) {
	for _, c := range []struct {
		s, w string
		want bool
	}{
		{"Tom ran.", "Tom", true},
		{"and Tom", "Tom", true},
		{"Tom's hat", "Tom", true},
		{"Tommy ran", "Tom", false},
		{"Atom bomb", "Tom", false},
		{"Tommy and Tom", "Tom", true},
		{"tom", "Tom", false},
		{"\"Lily!\"", "Lily", true},
		{"Lily2", "Lily", false},
		{"é Zoé", "Zoé", true},
		{"anything", "", false},
	} {
		if got := ContainsWord(c.s, c.w); got != c.want {
			t.Errorf("ContainsWord(%q, %q) = %v, want %v", c.s, c.w, got, c.want)
		}
	}
}

func TestNewTask(t *testing.T) {
	items := []Item{{ID: "a", Prompt: "x"}, {ID: "b", Prompt: "y"}}
	task := NewTask("mine", items)
	for limit, want := range map[int]int{-1: 2, 0: 2, 1: 1, 2: 2, 5: 2} {
		got, err := task.Items(limit)
		if err != nil || len(got) != want {
			t.Errorf("Items(%d) = %d items, %v; want %d", limit, len(got), err, want)
		}
	}
}
