package bench

import "slices"

// storyPrompts are the story openings of the default evaluation, in the
// style of TinyStories (the data stories260K and the other tinyllamas were
// trained on): simple words, a named child or animal, an unfinished
// sentence or a sentence that invites the next one. They were written for
// this benchmark; none is copied from the training set.
var storyPrompts = []string{
	"Once upon a time, there was a little girl named Lily.",
	"Once upon a time, there was a little",
	"Tom and his dog went to the park.",
	"One day, a big bear",
	"Sara had a red ball. She",
	"Once upon a time, in a small house, there lived a cat named Tom.",
	"Ben was a happy boy who liked to",
	"The sun was shining and the birds were singing.",
	"Mia found a shiny rock in the garden.",
	"Once upon a time, there was a kind old man",
	"Lily and Tom wanted to build a big castle.",
	"One morning, Max woke up and saw snow outside.",
	"Anna had a little bird. Every day,",
	"There was a small fish who lived in a big pond.",
	"Tim liked to play with his toy car.",
	"Once upon a time, there was a brave little mouse named Sam.",
	"The little duck could not find its mom.",
	"Sue and her mom went to the store to buy",
	"One day, Lucy saw a big box in the kitchen.",
	"Jack wanted to fly like a bird.",
	"Once upon a time, a little boy named Tim had a",
	"The dog barked at the cat, and the cat",
	"Emma loved to draw pictures of",
	"It was a rainy day, and Ben was sad because",
	"Once upon a time, there was a tree in the forest.",
	"The little girl looked at the sky and said,",
	"Spot was a good dog. He liked to",
	"Once there was a princess who lived in a big castle.",
	"Zoe and her friend found a lost puppy.",
	"One day, the sun did not come out.",
	"Once upon a time, there was a little red car named Zoom.",
	"Timmy was scared of the dark.",
	"Mom baked a big cake for",
	"The frog jumped into the water and",
	"Once upon a time, there was a girl who loved flowers.",
	"Sam had a new toy. It was a",
	"The old owl lived in a tall tree. One night,",
	"Lily saw a butterfly in the park. She wanted to",
	"Once upon a time, two friends went on a trip to the beach.",
	"Bob the bunny was very hungry.",
	"Kitty wanted to play, but her brother",
	"One day, a little boat sailed on the sea.",
	"Once upon a time, there was a big, friendly dragon.",
	"Tom was sad because he lost his",
	"The children went to school. Their teacher said,",
	"Once upon a time, there was a little star in the sky.",
	"Amy liked to help her dad in the garden.",
	"One day, the cat climbed up the tree and could not get down.",
	"Ben and Lily found a map under the bed.",
	"Once upon a time, there was a small town with a big park.",
}

// StoryPrompts returns the 50 story openings of the default evaluation.
func StoryPrompts() []string { return slices.Clone(storyPrompts) }
