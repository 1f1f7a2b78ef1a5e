/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Devices: one per usable interface CG_SOCKET_IFNAME (or NCCL's
 * NCCL_SOCKET_IFNAME) selects, NCCL's automatic choice when unset
 * (transport/sock_ifaddr.c: no docker*, lo* or virbr* beside a real
 * interface), and the properties NCCL's topology code
 * reads: a virtual device (pciPath NULL), the link speed from sysfs,
 * host pointers only, maxComms, maxRecvs, byte limits within NCCL's
 * bounds. Layer: plugin/nccl; calls transport/sock.
 */
#include <stdio.h>
#include <string.h>

#include "core/base/error.h"
#include "plugin/nccl/np_impl.h"
#include "transport/sock.h"

/* A link whose speed sysfs does not report (loopback, virtual). */
#define CG_NP_SPEED_DEFAULT 10000

static int cg__np_if_speed(const char *ifname)
{
    char path[96];
    int mbps = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/sys/class/net/%.*s/speed", IF_NAMESIZE,
             ifname);
    f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%d", &mbps) != 1)
            mbps = -1;
        fclose(f);
    }
    return mbps > 0 ? mbps : CG_NP_SPEED_DEFAULT;
}

/* FNV-1a of the name: stable across processes on one host. */
static uint64_t cg__np_guid(const char *ifname)
{
    uint64_t h = 1469598103934665603ull;

    for (const char *p = ifname; *p != '\0'; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h;
}

cg_status_t cg__np_devs_scan(cg__np_state_t *st)
{
    char names[CG_NP_DEV_MAX][IF_NAMESIZE];
    int n = 0;
    cg_status_t s;

    s = cg_sock_list_ifnames(st->cfg.socket_ifname, &names[0][0],
                             IF_NAMESIZE, CG_NP_DEV_MAX, &n);
    if (s != CG_OK)
        return s;
    for (int i = 0; i < n; i++) {
        cg__np_dev_t *d = &st->devs[i];
        snprintf(d->ifname, sizeof(d->ifname), "%.*s", IF_NAMESIZE - 1,
                 names[i]);
        snprintf(d->name, sizeof(d->name), "%s", d->ifname);
        d->speed_mbps = cg__np_if_speed(names[i]);
        d->guid = cg__np_guid(names[i]);
        cg_info(&st->log, "net plugin %s: device %d is interface %s, "
                "%d Mbps", CG_NP_NAME, i, d->ifname, d->speed_mbps);
    }
    st->ndevs = n;
    return CG_OK;
}

ncclResult_t cg__np_devices(int *ndev)
{
    if (ndev == NULL)
        return ncclInvalidArgument;
    if (cg__np.users == 0)
        return ncclInvalidUsage;
    *ndev = cg__np.ndevs;
    return ncclSuccess;
}

ncclResult_t cg__np_get_properties(int dev, ncclNetProperties_v11_t *props)
{
    const cg__np_dev_t *d;

    if (props == NULL || cg__np.users == 0)
        return props == NULL ? ncclInvalidArgument : ncclInvalidUsage;
    if (dev < 0 || dev >= cg__np.ndevs) {
        cg_warn(&cg__np.log, "net plugin %s: getProperties of device %d: "
                "there are %d", CG_NP_NAME, dev, cg__np.ndevs);
        return ncclInvalidArgument;
    }
    d = &cg__np.devs[dev];
    memset(props, 0, sizeof(*props));
    props->name = (char *)d->name;
    props->pciPath = NULL;
    props->guid = d->guid;
    props->ptrSupport = NCCL_PTR_HOST;
    props->regIsGlobal = 0;
    props->forceFlush = 0;
    props->speed = d->speed_mbps;
    props->port = 0;
    props->latency = 0;
    props->maxComms = CG_NP_MAX_COMMS;
    props->maxRecvs = CG_NP_MAX_RECVS;
    props->netDeviceType = NCCL_NET_DEVICE_HOST;
    props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
    props->maxP2pBytes = CG_NP_MAX_BYTES;
    props->maxCollBytes = CG_NP_MAX_BYTES;
    props->maxMultiRequestSize = 1;
    return ncclSuccess;
}
