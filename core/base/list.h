/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Intrusive doubly-linked list: a head is a link to itself when empty;
 * elements embed a cg_list_t and are recovered with cg_list_entry. Used by
 * the transports for their request and connection queues.
 * Part of core/base; calls nothing.
 */
#ifndef CG_BASE_LIST_H
#define CG_BASE_LIST_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cg_list {
    struct cg_list *prev, *next;
} cg_list_t;

#define cg_list_entry(ptr, type, member)                                     \
    ((type *)((char *)(ptr)-offsetof(type, member)))

static inline void cg_list_init(cg_list_t *head)
{
    head->prev = head->next = head;
}

static inline bool cg_list_empty(const cg_list_t *head)
{
    return head->next == head;
}

/* Appends e at the tail of head. */
static inline void cg_list_push(cg_list_t *head, cg_list_t *e)
{
    e->prev = head->prev;
    e->next = head;
    head->prev->next = e;
    head->prev = e;
}

/* Moves every element of list, in order, to the tail of head; list is
 * left empty. O(1). */
static inline void cg_list_splice_tail(cg_list_t *head, cg_list_t *list)
{
    if (list->next == list)
        return;
    list->next->prev = head->prev;
    head->prev->next = list->next;
    list->prev->next = head;
    head->prev = list->prev;
    list->prev = list->next = list;
}

/* Unlinks e and leaves it a list of its own (deleting twice is harmless). */
static inline void cg_list_del(cg_list_t *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    cg_list_init(e);
}

#endif
