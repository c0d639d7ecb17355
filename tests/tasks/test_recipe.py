"""--recipe: how long a command-line run trains when --num_train_epochs is not given."""

import tensorflow as tf

from bert_tf.errors import UsageError
from bert_tf.tasks.runner import TrainingPlan
from bert_tf.tasks.settings import FinetuneSettings


def plan(num_examples, **changes):
    settings = FinetuneSettings.of(task="classification", output_dir="/tmp/unused", **changes)
    return TrainingPlan.make(settings, num_examples, has_eval_data=True)


class RecipeTest(tf.test.TestCase):
    def test_small_data_trains_for_at_least_300_updates_and_large_data_as_the_original(self):
        small = plan(1176)  # the man-page task of issue 42: 37 batches of 32 an epoch
        self.assertEqual((small.num_train_epochs, small.num_train_steps), (9.0, 333))
        self.assertEqual(plan(1176, recipe="original").num_train_steps, 111)
        for examples in (3200, 50_000):  # 100 batches an epoch or more: the original's 3 epochs
            self.assertEqual(plan(examples).num_train_epochs, 3.0)
            self.assertEqual(
                plan(examples).num_train_steps, plan(examples, recipe="original").num_train_steps
            )
        self.assertEqual(plan(40).num_train_epochs, 20.0)  # at most 20 epochs
        self.assertEqual(plan(1176, num_train_epochs=2.0).num_train_steps, 74)  # the flag wins
        self.assertEqual(plan(1176, train_batch_size=16).num_train_epochs, 5.0)  # 74 batches an epoch

    def test_an_unknown_recipe_is_refused(self):
        with self.assertRaisesRegex(UsageError, "--recipe=fast is not a recipe; use auto or original"):
            plan(10, recipe="fast")
